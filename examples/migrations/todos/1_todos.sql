-- The to-do list itself.
CREATE TABLE todos (
    id BIGSERIAL PRIMARY KEY,
    description TEXT NOT NULL,
    done BOOLEAN NOT NULL DEFAULT FALSE
);
