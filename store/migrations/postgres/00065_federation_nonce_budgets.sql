-- +goose Up
-- The per-minute count of verified pod-to-pod calls (R-G5), by calling
-- pod: one caller (a holder of the secret signing as one pod, buggy or
-- hostile) that spends its budget, vdibroker.MaxNoncesPerMinute, no
-- longer has every other pod's calls refused. pod is the budget
-- (vdibroker.NonceUse): a pod of the document, or '' for every caller
-- while this pod holds no document. Rows older than five minutes are
-- deleted by each count, so the table holds a row per caller and minute
-- of the last few. federation_nonce_minutes, the count of the whole pod,
-- stays for the replicas of an older version during a rolling upgrade
-- (they count there, the upgraded ones here).
CREATE TABLE federation_nonce_budgets (
    pod    TEXT COLLATE "C" NOT NULL,
    minute BIGINT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (pod, minute)
);
CREATE INDEX federation_nonce_budgets_by_minute ON federation_nonce_budgets (minute);

-- +goose Down
DROP TABLE federation_nonce_budgets;
