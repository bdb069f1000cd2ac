"""Resource models (pydantic) for the ptah.io/v1alpha1 API and the CRD manifests generated from them."""
