/** @gitops/rhoas-operator: the RHOAS operator (packages/rhoas-operator/README.md). */
export { type BuildRhoasOperatorOptions, buildRhoasOperator, type RhoasOperator } from './app.ts';
export * from './cloud-services-client.ts';
export * from './config.ts';
