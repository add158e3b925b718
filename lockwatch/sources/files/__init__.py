"""Lock files in directories: the scanner and one decoder per format."""
