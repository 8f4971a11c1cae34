"""Fixture: the plugin-manager lines of Hermes (0.16.0, 0.17.0, 0.19.0) the gate edits."""


class _Scanner:
    def _scan_directory(self, path, source):
        return []

    def scan(self, user_dir, project_dir, enable_project):
        user_manifests = self._scan_directory(user_dir, source="user")
        if enable_project:
            project_manifests = self._scan_directory(project_dir, source="project")
            return user_manifests + project_manifests
        return user_manifests
