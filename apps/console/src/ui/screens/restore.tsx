import { Page } from '../components/ui.tsx';

export function Restore() {
  return <Page title="Restore">{null}</Page>;
}
