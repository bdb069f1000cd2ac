"""Watch, queue, reconcile loop, leader election, metrics, health."""
