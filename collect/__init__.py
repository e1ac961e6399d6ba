"""The collection campaign: a seeded plan of groups, measured into the Parquet dataset (GPU hosts; imports
neither xgboost nor mlflow)."""
