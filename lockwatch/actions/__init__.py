"""What lockwatch does besides looking: writing incident reports (and, later, breaking
or stealing locks). Unlike the model, actions may touch files."""
