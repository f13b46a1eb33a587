/* The suite's generated models: a domain's MJCF parsed with libxml2, its <include>s inlined and the task's
 * edit applied (as the suite's _make_model functions do with lxml), written back as one MJCF text. */
#include "dmc_xml.h"

#include <crl/file.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/xmlerror.h>

/* The suite's common files are a few KiB. */
#define DMC_INCLUDE_MAX (1u << 20)
#define DMC_INCLUDE_DEPTH 8

xmlNode *dmc_xml_child(xmlNode *parent, const char *name)
{
    for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST name) == 0)
            return c;
    return NULL;
}

int dmc_xml_children(xmlNode *parent, const char *name, xmlNode **out, int max)
{
    int n = 0;
    for (xmlNode *c = parent ? parent->children : NULL; c; c = c->next)
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST name) == 0) {
            if (n < max)
                out[n] = c;
            n++;
        }
    return n;
}

xmlNode *dmc_xml_path(xmlDoc *doc, const char *const *names)
{
    xmlNode *n = xmlDocGetRootElement(doc);
    for (; n && *names; names++)
        n = dmc_xml_child(n, *names);
    return n;
}

xmlNode *dmc_xml_find(xmlNode *n, const char *tag, const char *name)
{
    for (xmlNode *c = n ? n->children : NULL; c; c = c->next) {
        if (c->type != XML_ELEMENT_NODE)
            continue;
        if (xmlStrcmp(c->name, BAD_CAST tag) == 0) {
            xmlChar *v = xmlGetProp(c, BAD_CAST "name");
            bool match = v && xmlStrcmp(v, BAD_CAST name) == 0;
            xmlFree(v);
            if (match)
                return c;
        }
        xmlNode *deep = dmc_xml_find(c, tag, name);
        if (deep)
            return deep;
    }
    return NULL;
}

int dmc_xml_remove_all(xmlNode *n, const char *tag)
{
    int removed = 0;
    xmlNode *c = n ? n->children : NULL;
    while (c) {
        xmlNode *next = c->next;
        if (c->type == XML_ELEMENT_NODE && xmlStrcmp(c->name, BAD_CAST tag) == 0) {
            xmlUnlinkNode(c);
            xmlFreeNode(c);
            removed++;
        } else if (c->type == XML_ELEMENT_NODE) {
            removed += dmc_xml_remove_all(c, tag);
        }
        c = next;
    }
    return removed;
}

xmlNode *dmc_xml_add(xmlNode *parent, const char *name, const char *const *attrs)
{
    xmlNode *n = xmlNewChild(parent, NULL, BAD_CAST name, NULL);
    for (int k = 0; n && attrs && attrs[k]; k += 2)
        if (!xmlSetProp(n, BAD_CAST attrs[k], BAD_CAST attrs[k + 1]))
            return NULL;
    return n;
}

int dmc_xml_set(xmlNode *n, const char *attr, const char *value, const dmc_task *t, crl_error *err)
{
    if (!n || !xmlSetProp(n, BAD_CAST attr, BAD_CAST value))
        return crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: cannot set %s='%s' in the model", t->id, attr,
                             value);
    return CRL_OK;
}

int dmc_xml_missing(const dmc_task *t, const char *what, crl_error *err)
{
    return crl_error_set(err, CRL_E_CONFIG,
                         "dm_control: %s: the model has no %s, which the task's generated model edits "
                         "(is suite_dir a dm_control suite directory of a matching version?)",
                         t->id, what);
}

static int parse_error(const dmc_task *t, const char *what, crl_error *err)
{
    const xmlError *x = xmlGetLastError();
    return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: %s is not well-formed XML (line %d): %s", t->id,
                         what, x ? x->line : 0, x && x->message ? x->message : "parse error");
}

/* Replaces each <include file=F/> under n by the children of F's root, as MuJoCo's parser does. */
static int inline_includes(const dmc_task *t, xmlNode *n, const char *dir, int depth, crl_error *err)
{
    xmlNode *c = n->children;
    while (c) {
        xmlNode *next = c->next;
        if (c->type != XML_ELEMENT_NODE) {
            c = next;
            continue;
        }
        if (xmlStrcmp(c->name, BAD_CAST "include") != 0) {
            int rc = inline_includes(t, c, dir, depth, err);
            if (rc != CRL_OK)
                return rc;
            c = next;
            continue;
        }
        xmlChar *file = xmlGetProp(c, BAD_CAST "file");
        if (!file)
            return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: an <include> in %s/%s.xml has no file", t->id,
                                 dir, t->domain);
        if (depth >= DMC_INCLUDE_DEPTH) {
            xmlFree(file);
            return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: <include>s in %s nest deeper than %d", t->id,
                                 dir, DMC_INCLUDE_DEPTH);
        }
        char path[4096];
        int len = snprintf(path, sizeof path, "%s/%s", dir, (const char *)file);
        xmlFree(file);
        if (len < 0 || (size_t)len >= sizeof path)
            return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: an included path under %s is too long", t->id,
                                 dir);
        char *text = NULL;
        size_t n_text = 0;
        crl_error fe;
        crl_error_clear(&fe);
        if (crl_file_read(path, "included model file", 0, DMC_INCLUDE_MAX, &text, &n_text, &fe) != CRL_OK)
            return crl_error_set(err, CRL_E_CONFIG, "[plugin.dm_control] suite_dir = '%s': %s", dir, fe.message);
        xmlDoc *inc = xmlReadMemory(text, (int)n_text, path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR |
                                                                       XML_PARSE_NOWARNING);
        crl_free(text);
        if (!inc)
            return parse_error(t, path, err);
        xmlNode *root = xmlDocGetRootElement(inc);
        int rc = root ? inline_includes(t, root, dir, depth + 1, err) : CRL_OK;
        for (xmlNode *k = root ? root->children : NULL; rc == CRL_OK && k; k = k->next) {
            xmlNode *copy = xmlDocCopyNode(k, n->doc, 1);
            if (!copy || !xmlAddPrevSibling(c, copy))
                rc = crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory inlining %s", t->id, path);
        }
        xmlFreeDoc(inc);
        if (rc != CRL_OK)
            return rc;
        xmlUnlinkNode(c);
        xmlFreeNode(c);
        c = next;
    }
    return CRL_OK;
}

/* libxml2's one-time set-up is not safe to race: envs may be made on several threads. */
static pthread_once_t xml_once = PTHREAD_ONCE_INIT;

static void xml_init(void)
{
    xmlInitParser();
}

int dmc_xml_generate(const dmc_task *t, const char *text, size_t len, const char *dir, char **out,
                     size_t *out_len, crl_error *err)
{
    *out = NULL;
    *out_len = 0;
    if (len > (size_t)0x7fffffff)
        return crl_error_set(err, CRL_E_CONFIG, "dm_control: %s: the model is too large", t->id);
    pthread_once(&xml_once, xml_init);
    xmlDoc *doc = xmlReadMemory(text, (int)len, dir ? "suite model" : "bundled model", NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return parse_error(t, dir ? "the suite's model" : "the bundled model", err);
    int rc = CRL_OK;
    xmlNode *root = xmlDocGetRootElement(doc);
    if (!root || xmlStrcmp(root->name, BAD_CAST "mujoco") != 0)
        rc = dmc_xml_missing(t, "<mujoco> root", err);
    if (rc == CRL_OK && dir)
        rc = inline_includes(t, root, dir, 0, err);
    if (rc == CRL_OK && t->edit)
        rc = t->edit(t, doc, err);
    if (rc == CRL_OK) {
        xmlChar *mem = NULL;
        int size = 0;
        xmlDocDumpMemory(doc, &mem, &size);
        char *copy = mem && size > 0 ? malloc((size_t)size + 1) : NULL;
        if (!copy) {
            rc = crl_error_set(err, CRL_E_NOMEM, "dm_control: %s: out of memory writing the model", t->id);
        } else {
            memcpy(copy, mem, (size_t)size);
            copy[size] = '\0';
            *out = copy;
            *out_len = (size_t)size;
        }
        xmlFree(mem);
    }
    xmlFreeDoc(doc);
    return rc;
}
