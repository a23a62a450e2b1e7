"""The two-centroid gut feeling (plan §5.1): subconscious vs attention centroid, the delta,
its logging, and the gut axes found by PCA in the deep pass."""
