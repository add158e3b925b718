"""ZooKeeper lock recipes (kazoo's and Curator's), read with kazoo."""
