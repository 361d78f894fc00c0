"""New entities between retrains: batches arriving in `incoming/`, validated, embedded
inductively by the current model and tokenised by the current hierarchy, without a retrain."""
