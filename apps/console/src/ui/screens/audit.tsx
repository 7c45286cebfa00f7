import { Page } from '../components/ui.tsx';

export function Audit() {
  return <Page title="Audit">{null}</Page>;
}
