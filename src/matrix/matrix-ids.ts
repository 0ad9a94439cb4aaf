import { newId } from "../api/http.ts";

/** A matrix id: sortable by time, and a valid prefix for Workflow instance ids. */
export const newMatrixId = () => newId("mx");
