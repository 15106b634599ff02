// Types of the SQL (PostgreSQL, MySQL/MariaDB) backend for the Node binding: its URL form, its client options and its
// `connect` overloads, added to lib/index.d.ts's by declaration merging (lib/transport/types.d.ts,
// written by `ci.sh build`, lists every transport's types).

import type { BaseClientOptions, Client } from '../index';

/**
 * A SQL client (`postgres://`, `mysql://` URLs): locks are rows of one table, configured by the URL's
 * parameters (`table_prefix`, `schema`, `sslmode` / `ssl-mode`); `commandTimeoutMs` bounds one batch.
 */
export type SqlClientOptions = Pick<BaseClientOptions, 'connectTimeoutMs' | 'commandTimeoutMs' | 'tlsCaPem' | 'label'>;

/** A PostgreSQL URL (libpq's form) or a MySQL/MariaDB one: `postgres://user:pw@host/db?sslmode=..`, `mysql://..`. */
export type SqlUrl = `postgres://${string}` | `postgresql://${string}` | `mysql://${string}` | `mariadb://${string}`;

declare module '../index' {
    interface ClientOptionsByBackend {
      /** `postgres://` / `postgresql://` (PostgreSQL) and `mysql://` / `mariadb://` (MySQL/MariaDB) clients. */
      sql: SqlClientOptions;
    }
  /** Connects to PostgreSQL or MySQL/MariaDB; row ids are fencing tokens, waiters are woken by NOTIFY / GET_LOCK. */
  export function connect(target: SqlUrl, options?: SqlClientOptions): Promise<Client>;
}
