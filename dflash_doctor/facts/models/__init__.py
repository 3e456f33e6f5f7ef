"""The models layer's facts (judged by checks.models and checks.serve): the target and drafter models, each
described from its files (`models`)."""
