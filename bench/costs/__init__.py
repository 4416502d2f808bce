"""The cost parts: start-up, memory and CPU of each executable, a read's and a scrape's cost."""
