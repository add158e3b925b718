"""The Textual dashboard: screens, widgets and themes."""
