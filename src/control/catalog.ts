/**
 * The method catalog without a running gateway: the same list the control socket serves (endpoint
 * methods from the EndpointTable, then the gateway's own), for `cloudlib ctl` help and completion.
 */
import { endpointMethods, RPC_METHODS, type MethodInfo } from './methods.js';
import { gatewayMethods, type GatewayControlTarget } from './gateway-methods.js';
import { watchMethod } from './watch-method.js';

/** A target with nothing behind it: the catalog only reads names, summaries and parameters, no handler runs. */
const DESCRIBE_ONLY = new Proxy({}, { get: () => undefined }) as GatewayControlTarget;

export function methodCatalog(): MethodInfo[] {
  return [...endpointMethods(DESCRIBE_ONLY), ...gatewayMethods(DESCRIBE_ONLY), watchMethod(undefined), RPC_METHODS].map(({ name, summary, params, oneOf, paramsNote }) => ({ name, summary, params, oneOf, ...(paramsNote ? { paramsNote } : {}) }));
}
