-- Passage vectors for meaning search across the documents (docs.search_all): one space, the
-- embedder's model and dimension; a vector is the little-endian f32 unit vector of its passage.
-- Derived like the passages: a passage replaced or gone takes its vector with it.
CREATE TABLE chunk_vectors (
    chunk_id INTEGER PRIMARY KEY,
    model    TEXT NOT NULL,
    dim      INTEGER NOT NULL,
    vec      BLOB NOT NULL
);
CREATE TRIGGER chunks_vectors_ad AFTER DELETE ON chunks BEGIN
    DELETE FROM chunk_vectors WHERE chunk_id = old.id;
END;
