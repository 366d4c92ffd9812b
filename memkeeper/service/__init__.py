"""The service layer: cron schedules, the scheduler, the ``memkeeper run`` daemon, systemd
notification and unit files. Only here is APScheduler imported."""
