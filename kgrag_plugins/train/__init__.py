"""Training jobs (CPU): the FRAG hop classifier; later the translator SFT and DPO data."""
