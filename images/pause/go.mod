module gitops-service/images/pause

go 1.26.0
