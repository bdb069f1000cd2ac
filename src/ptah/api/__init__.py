"""Resource models (pydantic) for ptah.io/v1alpha1, and the CRDs generated from them."""
