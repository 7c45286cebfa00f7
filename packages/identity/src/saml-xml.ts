/**
 * The XML the SAML files read (identity-provider metadata, the SAMLResponse), on @xmldom/xmldom:
 * parsing without a DTD and namespace-aware element and attribute access.
 */
import { DOMParser } from '@xmldom/xmldom';

export const NS_DS = 'http://www.w3.org/2000/09/xmldsig#';

/**
 * Parses XML with no DTD at all: a document holding `<!DOCTYPE` or `<!ENTITY` is refused before
 * parsing (xmldom never fetches external entities, and none are declared to expand). Null when
 * the text is not one well-formed document.
 */
export function parseXml(text: string): Document | null {
  if (/<!DOCTYPE|<!ENTITY/i.test(text)) return null;
  let failed = false;
  const fail = () => {
    failed = true;
  };
  let doc: Document;
  try {
    doc = new DOMParser({
      locator: {},
      errorHandler: { warning: () => {}, error: fail, fatalError: fail },
    }).parseFromString(text, 'text/xml') as unknown as Document;
  } catch {
    return null;
  }
  if (failed || !doc || !doc.documentElement) return null;
  return doc;
}

/** The element children of `el` in namespace `ns` named `local`. */
export function children(el: Element, ns: string, local: string): Element[] {
  const out: Element[] = [];
  for (let n = el.firstChild; n !== null; n = n.nextSibling)
    if (n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local)
      out.push(n as Element);
  return out;
}

export function child(el: Element, ns: string, local: string): Element | undefined {
  return children(el, ns, local)[0];
}

export function textOf(el: Element | undefined): string {
  return el?.textContent ?? '';
}

/** An attribute's value, or null when absent (xmldom answers '' for an absent attribute). */
export function attr(el: Element, name: string): string | null {
  return el.hasAttribute(name) ? el.getAttribute(name) : null;
}

export function is(el: Element, ns: string, local: string): boolean {
  return el.namespaceURI === ns && el.localName === local;
}
