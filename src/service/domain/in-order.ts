/**
 * Array operations whose callback reads the metadata store (asynchronous): the items one after the
 * other, in order — inside a transaction its statements run one at a time anyway.
 */

export async function mapInOrder<T, U>(items: Iterable<T>, fn: (item: T, index: number) => Promise<U>): Promise<U[]> {
  const out: U[] = [];
  let i = 0;
  for (const item of items) out.push(await fn(item, i++));
  return out;
}

export async function filterInOrder<T>(items: Iterable<T>, keep: (item: T) => Promise<boolean>): Promise<T[]> {
  const out: T[] = [];
  for (const item of items) if (await keep(item)) out.push(item);
  return out;
}

/** Whether `test` holds for some item; stops at the first. */
export async function someInOrder<T>(items: Iterable<T>, test: (item: T) => Promise<boolean>): Promise<boolean> {
  for (const item of items) if (await test(item)) return true;
  return false;
}
