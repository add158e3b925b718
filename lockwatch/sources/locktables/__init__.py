"""Lock tables: the rows migration tools keep their lock in (knex, Liquibase, configured ones)."""
