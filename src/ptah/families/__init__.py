"""What differs between PtahSchema and PtahMigration, and nothing else."""
