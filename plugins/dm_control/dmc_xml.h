/* Editing a domain's MJCF as the suite's Python does with lxml, for the tasks whose models it generates. */
#ifndef CRL_DMC_XML_H
#define CRL_DMC_XML_H

#include "dmc.h"

#include <libxml/tree.h>

/* The first element child of parent named name, or NULL. */
xmlNode *dmc_xml_child(xmlNode *parent, const char *name);
/* The element children of parent named name: the first max in out, the count returned. */
int dmc_xml_children(xmlNode *parent, const char *name, xmlNode **out, int max);
/* The element at root/names[0]/names[1]/... (first match at each level; names NULL-terminated), or NULL. */
xmlNode *dmc_xml_path(xmlDoc *doc, const char *const *names);
/* The first element under n (depth first, document order) of tag `tag` whose name attribute is `name`,
 * as dm_control's xml_tools.find_element; NULL when there is none. */
xmlNode *dmc_xml_find(xmlNode *n, const char *tag, const char *name);
/* Unlinks and frees every element named tag under n; the count removed. */
int dmc_xml_remove_all(xmlNode *n, const char *tag);
/* A new last child element of parent with attributes (name, value pairs, NULL-terminated); NULL when out
 * of memory. */
xmlNode *dmc_xml_add(xmlNode *parent, const char *name, const char *const *attrs);
/* Set an attribute of n (NULL: an error as missing memory, for chained calls). */
int dmc_xml_set(xmlNode *n, const char *attr, const char *value, const dmc_task *t, crl_error *err);
/* CRL_E_CONFIG naming the element of the model the task's edit could not find. */
int dmc_xml_missing(const dmc_task *t, const char *what, crl_error *err);

#endif
