"""The reliability part: hostile inputs, differential fuzzing, availability under attack, soak."""
