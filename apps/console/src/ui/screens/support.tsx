import { Page } from '../components/ui.tsx';

export function Support() {
  return <Page title="Support">{null}</Page>;
}
