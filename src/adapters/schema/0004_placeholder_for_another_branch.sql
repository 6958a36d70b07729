-- Placeholder: version 4 belongs to another branch of issue 12. Migrations must be numbered without a
-- gap, so this branch (which owns 0006) needs a 4 to run on its own. Delete this file when merging.
SELECT 1;
