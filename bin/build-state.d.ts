export declare const BUILD_INPUTS: string[];
export declare function sourcesSnapshot(root: string): { newest_ms: number; files: number };
export declare function buildState(root: string): { state: 'current' | 'absent' | 'stale'; reason?: string };
