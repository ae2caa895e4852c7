export { eventually } from './eventually.ts';
