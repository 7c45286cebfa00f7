import { Page } from '../components/ui.tsx';

export function Setup() {
  return <Page title="Setup">{null}</Page>;
}
