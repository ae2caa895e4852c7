-- The certificate authorities (base64 of a PEM bundle, as in a kubeconfig's certificate-authority-data) that
-- sign the managed environment's API server certificate. NULL: the system trust store, or TLS verification
-- skipped (allow_insecure_skip_tls_verify). Public certificates, so stored in the clear. The agent passes them
-- to Argo CD as the cluster's tlsClientConfig.caData, so Argo CD trusts exactly what the backend verified.
ALTER TABLE cluster_credentials ADD COLUMN ca_data text;
