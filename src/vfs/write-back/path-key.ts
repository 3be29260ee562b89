/** The key of a path of a library in the write-back's maps (NUL never appears in a library name or path). */
export function keyOf(library: string, fullpath: string): string {
  return `${library}\0${fullpath}`;
}
