import { Page } from '../components/ui.tsx';

export function Approvals() {
  return <Page title="Approvals">{null}</Page>;
}
