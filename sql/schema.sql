-- idpool schema (design brief §3). Idempotent: safe to load again.
-- Load with:  mariadb idpool < sql/schema.sql
--
-- Numeric columns are signed so that an operator's bad value (say -5) is
-- stored and then rejected by the daemon with an error naming the field,
-- instead of being silently wrapped. A value of 0 in a sizing column means
-- "use the default", as in the original design.

CREATE TABLE IF NOT EXISTS `application` (
  `id`                  BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `create_time`         DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `update_time`         DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  `deleted_at`          BIGINT       NOT NULL DEFAULT 0    COMMENT 'soft delete: non-zero = not served',
  `entity_key`          VARCHAR(64)  NOT NULL              COMMENT 'unique key, [A-Za-z0-9_.-]{1,64}, not . or .., no leading -',
  `entity_name`         VARCHAR(255) NOT NULL DEFAULT ''   COMMENT 'human description',
  `increasing_type`     INT          NOT NULL DEFAULT 1    COMMENT '1 = monotonic, 2 = trend (shuffled blocks)',
  `start_offset`        BIGINT       NOT NULL DEFAULT 1    COMMENT 'first ID the application may ever get (never 0: 0 starts at 1)',
  `step`                BIGINT       NOT NULL DEFAULT 1000 COMMENT 'IDs per refill batch, 1..1000000',
  `current_offset`      BIGINT       NOT NULL DEFAULT 0    COMMENT 'durable high-water mark: every ID ever pushed is below it',
  `max_size_per_times`  BIGINT       NOT NULL DEFAULT 0    COMMENT 'most IDs one take may ask for (0 = 1000)',
  `max_size_per_second` BIGINT       NOT NULL DEFAULT 0    COMMENT 'most IDs per second (0 = 5000)',
  `min_size_percent`    BIGINT       NOT NULL DEFAULT 0    COMMENT 'refill below this % of max_pool_size (0 = 80)',
  `interval`            BIGINT       NOT NULL DEFAULT 0    COMMENT 'check interval in ms (0 = the daemon tick)',
  `max_pool_size`       BIGINT       NOT NULL DEFAULT 0    COMMENT 'pool capacity (0 = 60 x max_size_per_second)',
  `delta`               BIGINT       NOT NULL DEFAULT 1    COMMENT 'every ID % delta = remainder',
  `remainder`           BIGINT       NOT NULL DEFAULT 0    COMMENT '0 <= remainder < delta',
  `increment_max`       BIGINT       NOT NULL DEFAULT 1    COMMENT 'monotonic: gap between IDs is random in [1, increment_max] x delta',
  `max_id`              BIGINT       NOT NULL DEFAULT 0    COMMENT 'highest ID the application may ever get (0 = none: 2^63-1; 2^53-1 = JavaScript-safe)',
  `version`             BIGINT       NOT NULL DEFAULT 0    COMMENT 'bumped on every reservation',
  `id_space`            VARCHAR(64)  NOT NULL DEFAULT ''   COMMENT 'shared ID space: the IDs of applications with the same non-empty id_space never meet; empty = its own',
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_entity_key` (`entity_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Append-only audit of every range [lo, hi) reserved, written in the same
-- transaction as the current_offset update. The daemon also reads MAX(hi)
-- from here, of the row (application_id) and of its key (entity_key), so
-- neither an operator lowering current_offset nor a row deleted and added
-- again under the same key can make it hand out an ID twice; and, once a
-- minute, each application's first lease of the last 7 days
-- (ix_app_created), for the runway of its ID space.
CREATE TABLE IF NOT EXISTS `application_lease` (
  `id`             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `application_id` BIGINT UNSIGNED NOT NULL,
  `entity_key`     VARCHAR(64)  NOT NULL DEFAULT '' COMMENT 'application.entity_key when reserved; outlives the row',
  `lo`             BIGINT       NOT NULL COMMENT 'first ID of the range',
  `hi`             BIGINT       NOT NULL COMMENT 'end of the range (exclusive)',
  `instance`       VARCHAR(255) NOT NULL DEFAULT '' COMMENT 'idpoold instance that reserved it',
  `created_at`     DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `delta`          BIGINT       NULL DEFAULT NULL COMMENT 'the lattice the IDs were generated on: id % delta = remainder; NULL: unknown (older idpoold)',
  `remainder`      BIGINT       NULL DEFAULT NULL COMMENT 'see delta',
  `start_offset`   BIGINT       NULL DEFAULT NULL COMMENT 'no ID of the lease below it (nor 0)',
  PRIMARY KEY (`id`),
  KEY `ix_app_hi` (`application_id`, `hi`),
  KEY `ix_key_hi` (`entity_key`, `hi`),
  KEY `ix_app_created` (`application_id`, `created_at`),
  KEY `ix_key_lo` (`entity_key`, `lo`, `hi`, `delta`, `remainder`, `start_offset`, `application_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Upgrades of a database that an older version of this file created. Each
-- step checks information_schema first (MySQL 8 has no ADD COLUMN IF NOT
-- EXISTS), so loading the file again is always safe.
--
-- application_lease.entity_key (issue 18): leases were found by
-- application_id only, so a row deleted and added again under its key (a
-- new id) leased from start_offset again. The column is filled in from the
-- rows that still exist; the leases of rows deleted before the upgrade
-- cannot be (their key is gone with them). idpoold works without the column
-- (it says so in its log) and uses it from its next reservation on.
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.COLUMNS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease'
                        AND COLUMN_NAME = 'entity_key') = 0,
  'ALTER TABLE `application_lease` ADD COLUMN `entity_key` VARCHAR(64) NOT NULL DEFAULT '''' COMMENT ''application.entity_key when reserved; outlives the row'' AFTER `application_id`',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease'
                        AND INDEX_NAME = 'ix_key_hi') = 0,
  'ALTER TABLE `application_lease` ADD KEY `ix_key_hi` (`entity_key`, `hi`)',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
-- Leases written before the column existed (or by an idpoold older than it
-- during a rolling upgrade: load this file again once they are all new).
UPDATE `application_lease` l JOIN `application` a ON a.`id` = l.`application_id`
SET l.`entity_key` = a.`entity_key`
WHERE l.`entity_key` = '';
-- start_offset defaults to 1 (issue 18): ID 0 is never handed out (MySQL
-- AUTO_INCREMENT reads an inserted 0 as "generate one", ORMs as "not set").
-- Existing rows keep their value; an explicit 0 still never yields ID 0.
ALTER TABLE `application` ALTER COLUMN `start_offset` SET DEFAULT 1;
-- application_lease.ix_app_created (issue 23): the runway of an
-- application's ID space is measured from its first lease of the last 7
-- days, found through this index (a loose index scan) in a few reads per
-- application however long the ledger is. Without it idpoold still works,
-- reading the whole ledger once a minute.
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease'
                        AND INDEX_NAME = 'ix_app_created') = 0,
  'ALTER TABLE `application_lease` ADD KEY `ix_app_created` (`application_id`, `created_at`)',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
-- application_lease.delta, remainder, start_offset (issue 24): the lattice
-- a lease's IDs were generated on, as idpoold had it when it reserved, so
-- that idpoolctl verify can prove from the ledgers alone that no ID was
-- issued twice (within an environment and across environments that share
-- an application key). Leases written before the upgrade keep NULL: their
-- lattice is unknown and verify says how many it could not check. idpoold
-- works without the columns (it says so in its log) and fills them from its
-- next reservation on. ix_key_lo holds every column verify reads, in the
-- order it reads them (by key, then lo): it streams a ledger of 10 million
-- leases from the index alone, without a sort or a row lookup (adding it
-- to a large ledger takes about as long as copying the table once).
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.COLUMNS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease'
                        AND COLUMN_NAME = 'delta') = 0,
  'ALTER TABLE `application_lease` ADD COLUMN `delta` BIGINT NULL DEFAULT NULL COMMENT ''the lattice the IDs were generated on: id % delta = remainder; NULL: unknown (older idpoold)'', ADD COLUMN `remainder` BIGINT NULL DEFAULT NULL COMMENT ''see delta'', ADD COLUMN `start_offset` BIGINT NULL DEFAULT NULL COMMENT ''no ID of the lease below it (nor 0)''',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.STATISTICS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application_lease'
                        AND INDEX_NAME = 'ix_key_lo') = 0,
  'ALTER TABLE `application_lease` ADD KEY `ix_key_lo` (`entity_key`, `lo`, `hi`, `delta`, `remainder`, `start_offset`, `application_id`)',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
-- application.id_space (issue 24): applications that share one ID space
-- (their IDs go into one table, split by delta/remainder) name it here;
-- idpoold refuses to serve one whose IDs could meet another's. Existing rows
-- get '' (each its own space, as before). idpoold works without the column
-- (it says so in its log), every row then in its own space.
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.COLUMNS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application'
                        AND COLUMN_NAME = 'id_space') = 0,
  'ALTER TABLE `application` ADD COLUMN `id_space` VARCHAR(64) NOT NULL DEFAULT '''' COMMENT ''shared ID space: the IDs of applications with the same non-empty id_space never meet; empty = its own''',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;
-- application.max_id (issue 24): a per-application ceiling, e.g. 2^53-1 so
-- that every ID is exact in JSON and JavaScript. Existing rows get 0 (no
-- ceiling). idpoold works without the column (it says so in its log, and
-- serves every row without a ceiling) and reads it from its next load on.
SET @idpool_ddl = IF((SELECT COUNT(*) FROM information_schema.COLUMNS
                      WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'application'
                        AND COLUMN_NAME = 'max_id') = 0,
  'ALTER TABLE `application` ADD COLUMN `max_id` BIGINT NOT NULL DEFAULT 0 COMMENT ''highest ID the application may ever get (0 = none: 2^63-1; 2^53-1 = JavaScript-safe)'' AFTER `increment_max`',
  'DO 0');
PREPARE idpool_stmt FROM @idpool_ddl;
EXECUTE idpool_stmt;
DEALLOCATE PREPARE idpool_stmt;

-- Credentials of the ID API (idpoolctl tokens add/list/revoke). Only the
-- SHA-256 of each token is kept: a token is 256 random bits, so a plain hash
-- cannot be reversed or guessed, and idpoold compares hashes. `apps` is the
-- comma-separated list of application keys the token may take IDs of, or *
-- for every application. Revoking sets revoked_at (the row stays, for audit);
-- idpoold drops the token at its next reload (reload-ms) or SIGHUP.
-- Migration: loading this file again adds the table to an older schema.
CREATE TABLE IF NOT EXISTS `api_token` (
  `id`           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  `name`         VARCHAR(64)  NOT NULL COMMENT 'unique name, [A-Za-z0-9_.-]{1,64}',
  `token_sha256` CHAR(64)     NOT NULL COMMENT 'hex SHA-256 of the token (the token is never stored)',
  `apps`         VARCHAR(4096) NOT NULL COMMENT 'application keys, comma-separated, or *',
  `created_at`   DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `revoked_at`   DATETIME(3)  NULL DEFAULT NULL COMMENT 'set by tokens revoke: no longer accepted',
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_name` (`name`),
  UNIQUE KEY `uk_token` (`token_sha256`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- Redis ACL users for direct LPOP clients (idpoolctl apps grant/revoke), one
-- per application: user <key-prefix>:<key> may only LPOP and LLEN
-- <key-prefix>:{<key>}:pool. Only the SHA-256 of the password is kept (Redis
-- accepts it as is: ACL SETUSER ... #<sha256>). idpoold applies every row to
-- Redis on each (re)connect and reload, so a restarted Redis gets its users
-- back; a revoked row (revoked_at set) is deleted from Redis the same way.
-- Migration: loading this file again adds the table to an older schema.
CREATE TABLE IF NOT EXISTS `redis_user` (
  `entity_key`      VARCHAR(64)  NOT NULL COMMENT 'application.entity_key',
  `password_sha256` CHAR(64)     NOT NULL COMMENT 'hex SHA-256 of the password',
  `created_at`      DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `revoked_at`      DATETIME(3)  NULL DEFAULT NULL COMMENT 'set by apps revoke: deleted from Redis',
  PRIMARY KEY (`entity_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
