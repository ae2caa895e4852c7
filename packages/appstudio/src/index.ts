/** @gitops/appstudio: the App Studio environment API's controllers, run inside the backend process. */
export {};
