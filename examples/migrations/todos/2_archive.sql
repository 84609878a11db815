-- Finished items moved out of the list by `archive`.
CREATE TABLE todos_archive (
    id BIGINT PRIMARY KEY,
    description TEXT NOT NULL,
    archived_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
