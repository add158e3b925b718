"""The dashboard's views, one screen each, switched with tab (Textual modes)."""
