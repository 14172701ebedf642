"""rtctl components from outside rtctl: see entry_points.txt."""
