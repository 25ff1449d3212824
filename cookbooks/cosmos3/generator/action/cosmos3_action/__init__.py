"""The action family's own code, beside its notebooks: each embodiment's settings and the action caption
(`action_settings`), action arrays and files (`actions`), and pose actions as trajectories in metres
(`trajectories`). What other families share is in `helpers`."""
