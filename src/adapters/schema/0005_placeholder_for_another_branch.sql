-- Placeholder: version 5 belongs to another branch of issue 12. Migrations must be numbered without a
-- gap, so this branch (which owns 0006) needs a 5 to run on its own. Delete this file when merging.
SELECT 1;
