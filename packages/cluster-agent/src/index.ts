/** @gitops/cluster-agent: makes Argo CD match the database; see src/app.ts. */
export { type Agent, type BuildAgentOptions, buildAgent } from './app.ts';
export { type AgentConfig, agentConfigSchema, loadAgentConfig } from './config.ts';
export { projectApplicationState } from './status/application-state.projection.ts';
