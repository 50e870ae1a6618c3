"""The user's rights over their memory: Forget (with its purge), export and import, and backups."""
