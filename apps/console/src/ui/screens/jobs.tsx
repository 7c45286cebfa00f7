import { Page } from '../components/ui.tsx';

export function Jobs() {
  return <Page title="Jobs">{null}</Page>;
}
export function NewJob() {
  return <Page title="New job">{null}</Page>;
}
export function JobDetail({ params }: { params: Record<string, string | undefined> }) {
  return <Page title={`Job ${params.id ?? ''}`}>{null}</Page>;
}
