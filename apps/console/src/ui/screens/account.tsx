import { Page } from '../components/ui.tsx';

export function Account() {
  return <Page title="Account">{null}</Page>;
}
