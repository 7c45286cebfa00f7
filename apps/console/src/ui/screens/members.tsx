import { Page } from '../components/ui.tsx';

export function Members() {
  return <Page title="Members">{null}</Page>;
}
