"""Tests of the users' rights: Forget, export and import, backups (``tiers.rights``)."""
