/** Record types of the service, written from the spec's record tables (spec/service-api.md). */

export interface FileProperty {
  tag?: string;
  op_name?: string;
  inherit?: number;
  /** Spelled so by the service: simple permission names (file_preview, file_read, ...). */
  permisson?: string[];
  [k: string]: unknown;
}

export interface FileRecord {
  hash: string;
  dir: number;
  fullpath: string;
  filename: string;
  filehash: string;
  filesize: number;
  create_member_name: string;
  create_dateline: number;
  last_member_name: string;
  last_dateline: number;
  property: FileProperty;
  /** Metadata attributes shown in file lists (`set_metadata` `display`): template key → attribute → value. */
  metadata?: Record<string, Record<string, unknown>>;
}

export interface FileList { count: number; list: FileRecord[] }

export interface FileInfo extends Partial<Omit<FileRecord, 'property'>> {
  hash: string;
  dir: number;
  fullpath: string;
  filename: string;
  filesize: number;
  uri?: string;
  preview?: string;
  thumbnail?: string;
  tag?: string;
  lock?: number;
  file_count?: number;
  folder_count?: number;
  files_size?: number;
  property?: FileProperty;
  /** The caller's simple permissions here (`nop=1`: only those set on folders). */
  permission?: string[];
}

/** A change of the updates feed: the entry as it is now (no property), and what was done (`cmd`). */
export interface UpdateItem extends Omit<FileRecord, 'property'> {
  cmd?: number;
}
export interface Updates { fetch_dateline: number; list: UpdateItem[] }

export type RecycleItem = Omit<FileRecord, 'property'>;
export interface RecycleList { count: number; list: RecycleItem[] }

export interface HistoryItem {
  hid: string;
  act: number;
  act_name: string;
  dir: number;
  hash: string;
  fullpath: string;
  filename: string;
  filehash: string;
  filesize: number;
  member_id: number;
  member_name: string;
  dateline: number;
  property: string;
}
export interface HistoryList { count: number; list: HistoryItem[] }

export interface LibraryStat {
  org_id: number;
  org_name: string;
  mount_id: number;
  capacity: number;
  size: number;
  size_recycle: number;
  count_file: number;
  storage_point: string;
}

export interface CreateFileResult { hash: string; fullpath: string; state: number; server: string }
export interface PathResult { hash: string; fullpath: string }
export interface CopyResult { hash: string; fullpath: string; queue_id?: string }
export interface QueueStatus { status: number; fullpath: string; add_dateline: number; start_dateline: number; finish_dateline: number }
export interface LinkResult { link: string; code: string }
export interface LinkItem { filename: string; filesize: number; link: string; deadline: number; password: number; code?: string; fullpath?: string }
export interface PermissionResult { members: Record<string, string[]>; groups: Record<string, string[]> }
export interface UploadServers { 'm-upload': string[]; key: string }
export interface WebUploadResult { fullpath: string; filesize: number; hash: string }
export interface PreviewUrl { url: string; thumbnail?: string }

export interface UserFileRecord {
  hash: string;
  mount_id: number;
  dir: number;
  fullpath: string;
  filename: string;
  filehash: string;
  filesize: number;
  create_member_id: string;
  create_member_name: string;
  create_dateline: number;
  last_member_id: string;
  last_member_name: string;
  last_dateline: number;
  thumbnail?: string;
  lock?: number;
  preview?: string;
}

export interface UserLibraryItem {
  ent_id: number;
  org_id: number;
  org_name: string;
  mount_id: number;
  org_type: number;
  member_count: number;
  owner_member_id?: number;
  org_logo_url: string;
  size_org_total: number;
  size_org_use: number;
  storage_point: string;
  storage_ethernet: number;
}

export interface LibraryInfo {
  org_id: number;
  org_name: string;
  org_logo_url: string;
  size_org_total: number;
  size_org_use: number;
  file_count?: number;
  dir_count?: number;
  mount_id: number;
  owner_id?: number;
}
export interface LibraryListItem {
  org_id: number;
  org_name: string;
  org_logo_url: string;
  size_org_total: number;
  size_org_use: number;
  mount_id: number;
  owner_id: number;
}
export interface LibraryMember { member_id: number; out_id: string; account: string; member_name: string; member_email: string; state: number; role_id: number }
export interface LibraryGroup { id: number; name: string; role_id: number }
export interface OrgLogItem {
  hash: string; dir: number; act: number; filehash: string; filesize: number; fullpath: string; member_id: number;
  dateline: number; act_name: string; member_name: string; display_name: string; member_account: string;
}

export interface EntMember {
  member_id: number;
  out_id: string;
  account: string;
  member_name: string;
  member_email: string;
  member_phone: string;
  member_title: string;
  state: number;
  expire?: number;
  groups?: { id: number; name: string; group_code: string; out_id: string }[];
  orgs?: {
    id: number; name: string; type: number; owner: string; owner_id: number; member_count: number;
    size_total: number; size_used: number; mount_id: number; roles?: Record<string, string>;
  }[];
}
export interface EntGroup { id: number; name: string; out_id: string; parent_id: number }
export interface Role { id: number; name: string }
export interface EntLogItem { type: number; admin: string; content: string; ip: string; dateline: number }

export interface PartnerEnt {
  id: number; out_id?: string; name: string; trial: number; end_dateline: number; member_limit: number;
  member_count: number; space: number; size: number; account?: string;
}

export interface MemberState { member_id: number; state: number }
export interface TokenGrant { access_token: string; expires_in: number; refresh_token: string }
/** Endpoints answered "HTTP 200" with no body of note: `{}` or empty. */
export type Ok = Record<string, never> | Record<string, unknown>;
